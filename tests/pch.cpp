// The object that carries tests/pch.h's precompiled form (tests/CMakeLists.txt: kvinfer_test_pch).
