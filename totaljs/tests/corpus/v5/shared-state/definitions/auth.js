AUTH(function($) {
	$.success({ id: 'demo', email: 'demo@example.com' });
});
