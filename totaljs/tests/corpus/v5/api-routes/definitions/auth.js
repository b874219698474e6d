AUTH(function($) {
	var id = $.cookie(CONF.cookie);
	if (id && MAIN.sessions[id])
		$.success(MAIN.sessions[id]);
	else
		$.invalid();
});

MAIN.sessions = {};

FUNC.login = function(email, password, callback) {
	callback(null, { email: email });
};
