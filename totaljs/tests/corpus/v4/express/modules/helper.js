exports.x = 1;
