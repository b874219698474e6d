NEWACTION('Contact|create', {
	name: 'Create contact',
	action: function($) {
		$.success(model.title); // expect: action-model-param
	}
});
