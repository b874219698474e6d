NEWACTION('Items|create', {
	name: 'Create an item',
	input: '@Item', // expect: schema-load-order
	route: 'API ?',
	action: function($, model) {
		$.success(model);
	}
});
