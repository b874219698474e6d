exports.install = function() {
	ROUTE('GET /', index);
};

function index($) {
	$.view('index'); // expect: view-layout
}
