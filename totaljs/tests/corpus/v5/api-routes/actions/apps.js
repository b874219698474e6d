NEWACTION('Apps/list', {
	name: 'List apps',
	query: 'search:String',
	action: async function($) {
		var items = await NOSQL('apps').find().promise($);
		$.success(items);
	}
});

NEWACTION('Apps/read', {
	name: 'Read an app',
	params: '*id:UID',
	action: function($) {
		NOSQL('apps').read().where('id', $.params.id).error(404).callback($);
	}
});

NEWACTION('Apps/save', {
	name: 'Save an app',
	input: '*name:String, url:String, icon:String',
	action: async function($, model) {
		model.id = model.id || UID();
		await NOSQL('apps').insert(model).promise($);
		$.success(model.id);
	}
});

NEWACTION('Apps/remove', {
	name: 'Remove an app',
	params: '*id:UID',
	route: 'DELETE /api/apps/{id}/',
	action: function($) {
		NOSQL('apps').remove().where('id', $.params.id).callback($.done());
	}
});
