require('total5');

const options = {};
Total.run(options);
