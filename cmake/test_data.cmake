# The real tokenizer files the tests read (tests/data/tokenizers/PROVENANCE.md) are 37 MB as
# files and 5.7 MB as one xz stream, tests/data/tokenizers/packed.tar.xz: packed, the checkout
# stays small enough to travel to a lent GPU machine beside the GPU bundle (docs/cuda.md). At
# configure time the folder is put together in the build tree, its small files copied and the
# archive unpacked: KVINFER_TOKENIZER_DATA names it. tools/pack_tokenizer_data.sh remakes the archive.
set(KVINFER_TOKENIZER_DATA "${PROJECT_BINARY_DIR}/test-data/tokenizers")
set(_kvinfer_tokenizer_src "${PROJECT_SOURCE_DIR}/tests/data/tokenizers")
set(_kvinfer_tokenizer_archive "${_kvinfer_tokenizer_src}/packed.tar.xz")
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_kvinfer_tokenizer_archive}")
file(COPY "${_kvinfer_tokenizer_src}/" DESTINATION "${KVINFER_TOKENIZER_DATA}" PATTERN packed.tar.xz EXCLUDE)
# Unpacked again when the archive changed (its hash, in a stamp beside the folder) or a file of it
# is gone (the stamp's count).
file(SHA256 "${_kvinfer_tokenizer_archive}" _kvinfer_tokenizer_hash)
set(_kvinfer_tokenizer_stamp "${PROJECT_BINARY_DIR}/test-data/tokenizers.stamp")
file(GLOB _kvinfer_tokenizer_unpacked "${KVINFER_TOKENIZER_DATA}/hf/*/tokenizer.json" "${KVINFER_TOKENIZER_DATA}/gguf-vocab/*.gguf")
list(LENGTH _kvinfer_tokenizer_unpacked _kvinfer_tokenizer_count)
set(_kvinfer_tokenizer_old "")
if(EXISTS "${_kvinfer_tokenizer_stamp}")
  file(READ "${_kvinfer_tokenizer_stamp}" _kvinfer_tokenizer_old)
endif()
if(NOT _kvinfer_tokenizer_old STREQUAL "${_kvinfer_tokenizer_hash} ${_kvinfer_tokenizer_count}")
  file(ARCHIVE_EXTRACT INPUT "${_kvinfer_tokenizer_archive}" DESTINATION "${KVINFER_TOKENIZER_DATA}")
  file(GLOB _kvinfer_tokenizer_unpacked "${KVINFER_TOKENIZER_DATA}/hf/*/tokenizer.json" "${KVINFER_TOKENIZER_DATA}/gguf-vocab/*.gguf")
  list(LENGTH _kvinfer_tokenizer_unpacked _kvinfer_tokenizer_count)
  file(WRITE "${_kvinfer_tokenizer_stamp}" "${_kvinfer_tokenizer_hash} ${_kvinfer_tokenizer_count}")
endif()
