exports.install = function() {
	ROUTE('GET /', index);
};

function index($) {
	$.plain('home');
}
