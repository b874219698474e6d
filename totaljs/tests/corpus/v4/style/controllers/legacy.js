ROUTE('+GET /admin/', admin); // expect: controller-install, auth-delegate

function admin($) {
    $.plain('admin'); // expect: indent-tabs
}
