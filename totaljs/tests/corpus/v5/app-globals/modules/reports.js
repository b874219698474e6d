global.Reports = exports;

exports.run = function(name) {
	return name;
};
