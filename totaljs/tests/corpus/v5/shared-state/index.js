require('total5');
Total.run({});
