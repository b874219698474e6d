exports.install = function() {
	ROUTE('GET /', index);
	F.route('GET /ping/', ping);
	Total.route('POST /upload/ @upload <5MB', upload);
};

function index($) {
	$.plain('ok');
}

function ping($) {
	$.json({ pong: true });
}

function upload($) {
	$.success($.files.length);
}
