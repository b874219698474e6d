NEWACTION('Items/create', { // expect: api-action-id
	input: '*name:String',
	route: '+API ?',
	action: function($, model) {
		$.json({ success: true, value: model }); // expect: action-controller-method, success-envelope
	}
});

NEWACTION('Items/list', { // expect: api-action-id
	route: 'API ?',
	action: function($) {
		$.view('items'); // expect: action-controller-method
	}
});

AUTH(function($) {
	$.json({ user: null }); // expect: action-controller-method
});
