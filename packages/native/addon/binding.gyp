{
  "targets": [
    {
      "target_name": "pile_native",
      "sources": [
        "pile_native.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NODE_ADDON_API_DISABLE_DEPRECATED",
        "NODE_ADDON_API_ENABLE_TYPE_CHECK_ON_AS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"
      ],
      "cflags!": [
        "-fno-exceptions"
      ],
      "cflags_cc!": [
        "-fno-exceptions",
        "-std=gnu++17",
        "-std=gnu++14",
        "-std=gnu++1y"
      ],
      "cflags_cc": [
        "-std=c++17",
        "-fexceptions",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter"
      ],
      "xcode_settings": {
        "GCC_ENABLE_CPP_EXCEPTIONS": "YES",
        "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
        "MACOSX_DEPLOYMENT_TARGET": "11.0"
      }
    }
  ]
}
