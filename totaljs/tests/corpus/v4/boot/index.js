const options = {};
require('total4/debug')(options); // expect: boot-total5
