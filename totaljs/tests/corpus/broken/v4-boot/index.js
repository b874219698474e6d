require('total4/release')({ ip: '127.0.0.1' }); // expect: boot-total5
