require('total5');

F.http({ port: 8000, ip: '0.0.0.0' });
