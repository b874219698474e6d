// An app that starts a second listener the v5 way.
ON('ready', function() {
	if (CONF.second)
		Total.http({ port: CONF.second, load: 'none' });
});
