NEWSCHEMA('Items', function(schema) {

	schema.action('list', {
		name: 'List items',
		route: 'API ?',
		action: function($) {
			$.success([]);
		}
	});

	schema.action('read', {
		name: 'Read an item',
		route: 'API ?', // expect: api-route-duplicate
		action: function($) {
			$.success({});
		}
	});

});
