exports.install = function() {
	ROUTE('GET /admin/', admin);
};

function admin($) {
	$.plain('admin');
}
