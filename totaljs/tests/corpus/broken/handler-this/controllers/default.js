exports.install = function() {
	ROUTE('GET /', index);
};

function index() {
	this.plain('home'); // expect: handler-this
}
