exports.install = function(framework) {
	framework.route('GET /', index); // expect: install-argument
};

function index($) {
	$.plain('home');
}
