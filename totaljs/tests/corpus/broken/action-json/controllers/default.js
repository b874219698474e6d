exports.install = function() {
	ROUTE('GET /api/items/ --> Items|list');
};
