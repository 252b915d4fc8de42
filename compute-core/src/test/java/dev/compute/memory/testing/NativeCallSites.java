package dev.compute.memory.testing;

import java.io.IOException;
import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.instruction.InvokeDynamicInstruction;
import java.lang.classfile.instruction.InvokeInstruction;
import java.lang.constant.DirectMethodHandleDesc;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Stream;

/**
 * Where a module's classes call a native binding's functions, read from their bytecode: for backends that make
 * every call through one class of their own (a binding's global exception switch, for one, must not reach the rest).
 * Reads a folder of classes or a jar (the GPU machine's bundle: its trimmed runtime has no zip file system).
 */
public final class NativeCallSites {
    private NativeCallSites() {}

    /**
     * Every call from the classes that {@code ofModule} was loaded with to a method of {@code owner} (internal name,
     * {@code org/jocl/CL}) whose name starts with {@code prefix}, outside the class {@code allowed} (internal name):
     * "caller.method calls name", a method reference to one included. Fails when fewer than {@code atLeast} classes were read, so an empty scan cannot pass.
     */
    public static List<String> outside(Class<?> ofModule, String owner, String prefix, String allowed, int atLeast)
            throws IOException, URISyntaxException {
        Map<String, byte[]> classes = classFiles(Path.of(ofModule.getProtectionDomain().getCodeSource().getLocation().toURI()));
        if (classes.size() < atLeast) {
            throw new AssertionError("read " + classes.size() + " classes beside " + ofModule.getName() + ", expected at least " + atLeast);
        }
        List<String> calls = new ArrayList<>();
        classes.forEach((file, bytes) -> {
            ClassModel model = ClassFile.of().parse(bytes);
            String caller = model.thisClass().asInternalName();
            if (caller.equals(allowed)) {
                return;
            }
            for (MethodModel method : model.methods()) {
                method.code().ifPresent(code -> code.forEach(element -> {
                    if (element instanceof InvokeInstruction call && call.owner().asInternalName().equals(owner)
                            && call.name().stringValue().startsWith(prefix)) {
                        calls.add(caller + "." + method.methodName() + " calls " + call.name());
                    }
                    if (element instanceof InvokeDynamicInstruction lambda) { // a method reference (CL::clReleaseKernel) calls it too
                        for (var argument : lambda.bootstrapArgs()) {
                            if (argument instanceof DirectMethodHandleDesc handle && handle.owner().descriptorString().equals("L" + owner + ";")
                                    && handle.methodName().startsWith(prefix)) {
                                calls.add(caller + "." + method.methodName() + " refers to " + handle.methodName());
                            }
                        }
                    }
                }));
            }
        });
        return calls;
    }

    private static Map<String, byte[]> classFiles(Path classes) throws IOException {
        Map<String, byte[]> files = new TreeMap<>();
        if (Files.isDirectory(classes)) {
            try (Stream<Path> walk = Files.walk(classes)) {
                for (Path file : walk.filter(f -> f.toString().endsWith(".class")).toList()) {
                    files.put(classes.relativize(file).toString(), Files.readAllBytes(file));
                }
            }
            return files;
        }
        try (JarFile jar = new JarFile(classes.toFile())) {
            for (JarEntry entry : Collections.list(jar.entries())) {
                if (entry.getName().endsWith(".class")) {
                    try (InputStream in = jar.getInputStream(entry)) {
                        files.put(entry.getName(), in.readAllBytes());
                    }
                }
            }
        }
        return files;
    }
}
