NEWACTION('Contact|create', { name: 'Hammer', email: 'hammer@example.com' }); // expect: action-function
