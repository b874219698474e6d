const Fields = '*name:String, token:String, darkmode:Boolean, *env:{dev|test|prod}'.toJSONSchema();

NEWACTION('Settings|read', {
	name: 'Read settings',
	route: '+API ?',
	sa: true,
	action: function($) {
		var model = {};
		for (var key in Fields.properties)
			model[key] = PREF[key];
		model.token = PREF.token;
		$.success(model);
	}
});

NEWACTION('Settings|save', {
	name: 'Save settings',
	input: Fields,
	route: '+API ?',
	sa: true,
	action: function($, model) {
		for (var key in model)
			PREF.set(key, model[key]);
		OpenPlatform.refresh();
		Reports.run('settings');
		$.success();
	}
});
