exports.install = function() {
	ROUTE('GET /api/products/count/', Products|count); // expect: route-action-handler
};
