package dev.compute.memory.cuda;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The {@code .entry} functions of a PTX text and their parameters, as {@code nvcc -ptx} writes them
 * ({@code .visible .entry scale(.param .u64 scale_param_0, .param .f32 scale_param_1)}): what a launch's arguments
 * are checked against, since the driver checks nothing (a wrong count or size is undefined behaviour on the GPU).
 * A parameter the reader does not understand (a struct passed by value: {@code .param .align 8 .b8 p[16]}) is
 * {@link Kind#OTHER}, which no argument fits.
 */
final class PtxEntries {
    private PtxEntries() {}

    /** What a parameter holds, by its PTX type. */
    enum Kind {
        /** {@code .u64}, {@code .s64}, {@code .b64}: a pointer or a 64-bit integer. */
        BITS64("a 64-bit integer or pointer (.u64/.s64/.b64)"),
        /** {@code .u32}, {@code .s32}, {@code .b32}: a 32-bit integer. */
        BITS32("a 32-bit integer (.u32/.s32/.b32)"),
        FLOAT32("a float (.f32)"),
        FLOAT64("a double (.f64)"),
        OTHER("of a type no Java argument is passed as");

        final String words;

        Kind(String words) {
            this.words = words;
        }
    }

    private static final Pattern ENTRY = Pattern.compile("\\.entry\\s+([A-Za-z_$%][\\w$%]*)\\s*(\\(([^)]*)\\))?");
    /** PTX's comments, C's two kinds: the driver reads no code in them, so an entry or a .reqntid commented out is none. */
    private static final Pattern COMMENT = Pattern.compile("//[^\\n]*|/\\*.*?\\*/", Pattern.DOTALL);

    /** Each entry's parameter kinds, in order, by the entry's name. */
    static Map<String, List<Kind>> read(String ptx) {
        Map<String, List<Kind>> entries = new LinkedHashMap<>();
        Matcher matcher = ENTRY.matcher(withoutComments(ptx));
        while (matcher.find()) {
            String parameters = matcher.group(3);
            List<Kind> kinds = new ArrayList<>();
            if (parameters != null && !parameters.isBlank()) {
                for (String parameter : parameters.split(",")) {
                    kinds.add(kind(parameter));
                }
            }
            entries.put(matcher.group(1), List.copyOf(kinds));
        }
        return entries;
    }

    /** The {@code .reqntid} directive between an entry's parameters and its body: {@code .reqntid 128} or {@code .reqntid 8, 4}. */
    private static final Pattern REQNTID = Pattern.compile("\\.reqntid\\s+(\\d{1,9})(?:\\s*,\\s*(\\d{1,9}))?(?:\\s*,\\s*(\\d{1,9}))?");

    /**
     * The block {@code entry} must be launched with, in three dimensions ({@code .reqntid}, which Triton's PTX declares,
     * for one), 1 where the directive leaves a dimension out; null where it declares none.
     */
    static long @Nullable [] requiredBlock(String ptxWithComments, String entry) {
        String ptx = withoutComments(ptxWithComments);
        Matcher matcher = ENTRY.matcher(ptx);
        while (matcher.find()) {
            if (!matcher.group(1).equals(entry)) {
                continue;
            }
            int body = ptx.indexOf('{', matcher.end());
            Matcher required = REQNTID.matcher(ptx.substring(matcher.end(), body < 0 ? ptx.length() : body));
            if (!required.find()) {
                return null;
            }
            long[] block = {1, 1, 1};
            for (int d = 0; d < 3; d++) {
                if (required.group(d + 1) != null) {
                    block[d] = Long.parseLong(required.group(d + 1));
                }
            }
            return block;
        }
        return null;
    }

    private static String withoutComments(String ptx) {
        return COMMENT.matcher(ptx).replaceAll(" ");
    }

    private static Kind kind(String parameter) {
        if (parameter.contains("[")) {
            return Kind.OTHER; // an array of bytes: a struct by value
        }
        for (String token : parameter.trim().split("\\s+")) {
            @Nullable Kind kind = switch (token) {
                case ".u64", ".s64", ".b64" -> Kind.BITS64;
                case ".u32", ".s32", ".b32" -> Kind.BITS32;
                case ".f32" -> Kind.FLOAT32;
                case ".f64" -> Kind.FLOAT64;
                case ".u8", ".s8", ".b8", ".u16", ".s16", ".b16", ".f16", ".pred" -> Kind.OTHER;
                default -> null;
            };
            if (kind != null) {
                return kind;
            }
        }
        return Kind.OTHER;
    }
}
