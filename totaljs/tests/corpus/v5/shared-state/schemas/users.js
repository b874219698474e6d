NEWSCHEMA('Users', function(schema) {

	schema.action('list', {
		name: 'List users',
		action: function($) {
			NOSQL('users').find().callback($);
		}
	});

	schema.action('read', {
		name: 'Read a user',
		params: '*id:UID',
		action: function($) {
			NOSQL('users').read().where('id', $.params.id).error(404).callback($);
		}
	});

});
