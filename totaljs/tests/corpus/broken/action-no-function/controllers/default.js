exports.install = function() {
	ROUTE('POST /api/contact/ --> Contact|create');
};
