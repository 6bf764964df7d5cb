// Bundle builds (KVINFER_BUNDLE, tools/gpu_bundle.sh) link no libfmt: this object holds fmt's
// compiled part, as fmt's own src/format.cc builds it (fmt 9: format-inl.h and the explicit
// instantiations), so that the executables need no libfmt.so at run time. Compiled once here
// instead of FMT_HEADER_ONLY in every file (which cost the simulation build 40 % more time).
#include <fmt/format.h>

#if FMT_VERSION < 90000 || FMT_VERSION >= 100000
#error "KVINFER_BUNDLE compiles fmt 9's format.cc instantiations: another fmt needs its own list (src/core/fmt_bundle.cpp)"
#endif

#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

#ifndef FMT_STATIC_THOUSANDS_SEPARATOR
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
#endif

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
template FMT_API void buffer<wchar_t>::append(const wchar_t*, const wchar_t*);

}  // namespace detail
FMT_END_NAMESPACE
