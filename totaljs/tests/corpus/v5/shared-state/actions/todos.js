NEWSCHEMA('@Todo', '*name:String, done:Boolean, priority:Number');

NEWACTION('Todos|create', {
	name: 'Create a todo',
	input: '@Todo',
	route: '+API ?',
	action: async function($, model) {
		model.id = UID();
		model.userid = $.user.id;
		await NOSQL('todos').insert(model).promise($);
		FUNC.notify($.user, model.name);
		$.success(model.id);
	}
});

NEWACTION('Todos|list', {
	name: 'List todos',
	route: '+API ?',
	action: async function($) {
		var res = await ACTION('Todos|count', {}).promise($);
		var items = await NOSQL('todos').find().where('userid', $.user.id).promise($);
		$.success({ count: res.value, items: items });
	}
});

NEWACTION('Todos|count', {
	action: function($) {
		NOSQL('todos').count().callback($);
	}
});
