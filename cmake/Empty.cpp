// libmeshflow.so is made of the static libraries' objects alone (cmake/Package.cmake);
// CMake needs one source file to create a library target.
