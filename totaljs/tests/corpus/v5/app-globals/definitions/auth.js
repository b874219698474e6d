AUTH(function($) {
	var token = $.headers['x-token'];
	if (token && token === PREF.token)
		$.success({ id: 'admin', sa: true });
	else
		$.invalid();
});
