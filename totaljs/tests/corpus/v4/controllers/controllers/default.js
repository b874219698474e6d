exports.install = function() {
	ROUTE('/', index); // expect: route-method
	ROUTE('POST /upload/', upload, ['upload'], 1024 * 5); // expect: route-flags-array
	ROUTE('GET /api/users/ *Users --> query'); // expect: route-v4-schema
	ROUTE('API /api/ -users_read *Users --> read'); // expect: route-v4-schema
	F.route('/files/', files, ['upload']); // expect: route-method, route-flags-array
	ROUTE('FETCH /items/', items); // expect: route-method
};

function index() {
	var self = this; // expect: handler-this
	self.view('index');
}

function upload() {
	this.json({ success: true }); // expect: handler-this, success-envelope
}

function files() {
	var self = this; // expect: handler-this
	self.plain('files');
}

function items($) {
	$.json({ ok: true, items: [] });
}
