var Data = {};

Data.refresh = function(callback) {
	callback && callback();
};

global.OpenPlatform = Data;
