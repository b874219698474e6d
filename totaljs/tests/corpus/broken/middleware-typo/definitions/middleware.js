MIDDLEWARE('auth', function($, next) {
	if ($.headers['x-token'] === CONF.token)
		next();
	else
		$.invalid(401);
});
