AUTH(function($) {
	$.invalid();
});
