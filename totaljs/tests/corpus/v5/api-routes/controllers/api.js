exports.install = function() {

	// Apps
	ROUTE('+API /api/ -apps_list              --> Apps/list');
	ROUTE('+API /api/ -apps_read/{id}         --> Apps/read');
	ROUTE('+API /api/ +apps_save              --> Apps/save');
	ROUTE('+API /api/ -apps_remove/{id}       --> Apps/remove');

	// Account
	ROUTE('+API /api/ -account                --> Account|read');
	ROUTE('-API /api/ +login                  --> Account|login');

	ROUTE('get /logout/', logout); // expect: route-method-case
	ROUTE('+post /upload/ @upload <10MB', upload); // expect: route-method-case
	ROUTE('FILE /download/*.*', download);
	ROUTE('SOCKET /live/ @json', live);
};

function logout($) {
	$.cookie(CONF.cookie, '', '-1 day');
	$.redirect('/');
}

function upload($) {
	$.success($.files.length);
}

function download($) {
	$.filefs('files', $.split[1]);
}

function live() {
	var self = this;
	self.on('message', function(client, msg) {
		client.send(msg);
	});
}
