// The folder of nn-arena's public C header, for a native module of your own (as node-addon-api's
// include_dir): in binding.gyp, "include_dirs": ["<!(node -p \"require('nn-arena/include').dir\")"],
// then #include <nn_arena.h>.
exports.dir = __dirname;
exports.header = require('node:path').join(__dirname, 'nn_arena.h');
