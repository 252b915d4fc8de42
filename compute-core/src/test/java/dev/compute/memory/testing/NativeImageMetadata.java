package dev.compute.memory.testing;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A module's GraalVM native-image metadata ({@code META-INF/native-image/<groupId>/<artifactId>/reachability-metadata.json}),
 * read as the tests compare it with the code: the resource globs, and the FFM downcalls as the method types their
 * handles have (a {@code captureCallState} option adds the leading segment the call state is written to).
 */
public record NativeImageMetadata(List<String> resourceGlobs, Set<MethodType> downcalls) {

    private static final Map<String, Class<?>> CARRIERS = Map.of(
            "void", void.class, "jint", int.class, "jlong", long.class, "void*", MemorySegment.class);

    public static NativeImageMetadata of(String groupId, String artifactId) throws IOException {
        String path = "/META-INF/native-image/" + groupId + "/" + artifactId + "/reachability-metadata.json";
        JsonNode root;
        try (InputStream in = NativeImageMetadata.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException(path + " is not on the class path");
            }
            root = JsonMapper.builder().build().readTree(in);
        }
        List<String> globs = new ArrayList<>();
        root.path("resources").forEach(resource -> globs.add(resource.required("glob").asString()));
        Set<MethodType> downcalls = new HashSet<>();
        for (JsonNode downcall : root.path("foreign").path("downcalls")) {
            List<Class<?>> parameters = new ArrayList<>();
            if (downcall.path("options").path("captureCallState").asBoolean(false)) {
                parameters.add(MemorySegment.class);
            }
            downcall.required("parameterTypes").forEach(type -> parameters.add(carrier(type.asString())));
            downcalls.add(MethodType.methodType(carrier(downcall.required("returnType").asString()), parameters));
        }
        return new NativeImageMetadata(List.copyOf(globs), Set.copyOf(downcalls));
    }

    /** The types of the method handles a class holds in its static fields. */
    public static Set<MethodType> staticHandleTypes(Class<?> type) throws IllegalAccessException {
        return handleTypes(type, null);
    }

    /** The types of the method handles an object holds in its instance fields. */
    public static Set<MethodType> handleTypes(Object instance) throws IllegalAccessException {
        return handleTypes(instance.getClass(), instance);
    }

    private static Set<MethodType> handleTypes(Class<?> type, @Nullable Object instance) throws IllegalAccessException {
        Set<MethodType> types = new HashSet<>();
        for (Field field : type.getDeclaredFields()) {
            if (field.getType() == MethodHandle.class && Modifier.isStatic(field.getModifiers()) == (instance == null)) {
                field.setAccessible(true);
                types.add(((MethodHandle) field.get(instance)).type());
            }
        }
        return Set.copyOf(types);
    }

    private static Class<?> carrier(String layout) {
        Class<?> carrier = CARRIERS.get(layout);
        if (carrier == null) {
            throw new IllegalArgumentException("a layout the tests do not map yet: " + layout + " (known: " + CARRIERS.keySet() + ")");
        }
        return carrier;
    }
}
