global.PREF = MEMORIZE('preferences');

ON('ready', function() {
	if (!PREF.token)
		PREF.set('token', GUID(30));
});
