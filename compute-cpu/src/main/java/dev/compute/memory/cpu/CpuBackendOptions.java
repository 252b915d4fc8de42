package dev.compute.memory.cpu;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.spi.BackendSettings;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The CPU backend's own options ({@link BackendSettings#options()}):
 * <ul>
 *   <li>{@code page-size}: the granularity of page mapping for expandable segments, a multiple of the OS page
 *       size of at most 1GB: {@code 2MB} (default, as GPUs map), {@code 64KB}, {@code 4096};</li>
 *   <li>{@code pinned-fallback}: what a PINNED allocation does when {@code mlock} is refused (the memlock
 *       limit, {@code ulimit -l}): {@code unlocked} (default: ordinary memory, with one warning) or
 *       {@code fail} (a {@link dev.compute.memory.spi.BackendOutOfMemoryException} naming the limit).</li>
 * </ul>
 */
record CpuBackendOptions(long pageMappingGranularity, boolean failWhenUnlockable) {

    static final String PAGE_SIZE = "page-size";
    static final String PINNED_FALLBACK = "pinned-fallback";
    static final long DEFAULT_GRANULARITY = 2L << 20;
    /**
     * The largest page size: Linux's largest huge page. The pool reserves ranges of up to 2^30 pages, which a page
     * above it can overflow, and a page that large would map (and charge) a gigabyte for the smallest buffer.
     */
    static final long MAX_GRANULARITY = 1L << 30;

    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*(B|KB|KIB|MB|MIB|GB|GIB)?");

    /** Reads and checks the options; {@code osPageSize} is what the granularity must be a multiple of. */
    static CpuBackendOptions from(BackendSettings settings, long osPageSize) {
        long granularity = DEFAULT_GRANULARITY;
        String pageSize = settings.option(PAGE_SIZE);
        if (pageSize != null) {
            granularity = parseSize(pageSize);
            if (granularity <= 0 || granularity % osPageSize != 0 || granularity > MAX_GRANULARITY) {
                throw invalid(PAGE_SIZE, pageSize, "a positive multiple of the OS page size (" + osPageSize + " bytes) of at most 1GB, such as 2MB or 64KB");
            }
        }
        String fallback = settings.option(PINNED_FALLBACK);
        boolean fail = false;
        if (fallback != null) {
            fail = switch (fallback.trim().toLowerCase(Locale.ROOT)) {
                case "unlocked" -> false;
                case "fail" -> true;
                default -> throw invalid(PINNED_FALLBACK, fallback,
                        "unlocked (ordinary memory when mlock is refused) or fail (an out-of-memory error naming the memlock limit)");
            };
        }
        return new CpuBackendOptions(granularity, fail);
    }

    private static long parseSize(String text) {
        Matcher m = SIZE.matcher(text.trim().toUpperCase(Locale.ROOT));
        if (!m.matches()) {
            return -1;
        }
        @Nullable String unit = m.group(2);
        int shift = unit == null || unit.equals("B") ? 0 : switch (unit.charAt(0)) {
            case 'K' -> 10;
            case 'M' -> 20;
            default -> 30;
        };
        try {
            long value = Long.parseLong(m.group(1));
            return value > (Long.MAX_VALUE >> shift) ? -1 : value << shift;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private static InvalidSettingException invalid(String option, String value, String allowed) {
        return new InvalidSettingException(option + " (an option of the cpu backend)", value, allowed);
    }
}
