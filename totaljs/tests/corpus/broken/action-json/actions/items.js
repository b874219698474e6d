NEWACTION('Items|list', {
	name: 'List items',
	action: function($) {
		$.json([]); // expect: action-controller-method
	}
});
