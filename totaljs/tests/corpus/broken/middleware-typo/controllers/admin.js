exports.install = function() {
	ROUTE('GET /admin/ #auht', admin); // expect: route-middleware
};

function admin($) {
	$.plain('secret');
}
