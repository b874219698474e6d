NEWACTION('Products|count', {
	name: 'Count products',
	action: function($) {
		$.success(3);
	}
});
