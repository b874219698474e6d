NEWACTION('Account|read', {
	name: 'Read the account',
	action: function($) {
		$.success($.user);
	}
});

NEWACTION('Account|login', {
	name: 'Sign in',
	input: '*email:Email, *password:String',
	action: function($, model) {
		FUNC.login(model.email, model.password, $.callback);
	}
});
