exports.install = function() {
	ROUTE('GET /', index);
	ROUTE('GET /login/', 'login');
	ROUTE('GET /about/');
	ROUTE('#404', notfound);
};

async function index($) {
	var items = await NOSQL('items').find().take(10).promise($);
	$.view('index', { title: 'Items', items: items });
}

function notfound($) {
	$.layout('');
	$.view('404');
}
