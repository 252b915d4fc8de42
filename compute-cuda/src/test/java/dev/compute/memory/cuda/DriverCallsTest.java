package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.instruction.InvokeInstruction;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
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
import jcuda.CudaException;
import jcuda.driver.CUresult;
import org.junit.jupiter.api.Test;

/**
 * {@link DriverCalls} gives back every code JCuda's exception mode turns into an exception, and no class of the backend
 * calls JCuda's driver functions around it. Plain Java: no driver needed. What the backend does with the mode on is
 * {@code CudaBackendOnFakeDriverTest.withJCudasExceptionsOnTheScenarioEndsAlike}.
 */
class DriverCallsTest {

    @Test
    void everyResultJCudaNamesIsItsCodeAgain() throws IllegalAccessException {
        int checked = 0;
        for (Field field : CUresult.class.getFields()) {
            if (field.getType() == int.class && Modifier.isStatic(field.getModifiers()) && field.getInt(null) != CUresult.CUDA_SUCCESS) {
                int code = field.getInt(null);
                assertThat(DriverCalls.result(new CudaException(CUresult.stringFor(code)))).as(field.getName()).isEqualTo(code);
                checked++;
            }
        }
        assertThat(checked).as("CUresult's codes").isGreaterThan(50);
        assertThat(DriverCalls.result(new CudaException(CUresult.stringFor(CUresult.CUDA_ERROR_NOT_READY))))
                .isEqualTo(CudaResults.NOT_READY);
    }

    @Test
    void aCodeJCudaDoesNotKnowComesBackAsItsNumber() {
        assertThat(DriverCalls.result(new CudaException(CUresult.stringFor(123_457)))).isEqualTo(123_457);
    }

    @Test
    void anExceptionNamingNoResultIsThrownAgain() {
        CudaException other = new CudaException("Could not load the native library");
        assertThatThrownBy(() -> DriverCalls.result(other)).isSameAs(other);
        CudaException garbled = new CudaException("INVALID CUresult: twelve");
        assertThatThrownBy(() -> DriverCalls.result(garbled)).isSameAs(garbled);
    }

    @Test
    void noClassOfTheBackendCallsJCudasDriverFunctionsButDriverCalls() throws IOException, URISyntaxException {
        Path classes = Path.of(CudaBackend.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<String> direct = new ArrayList<>();
        Map<String, byte[]> classFiles = classFiles(classes);
        classFiles.forEach((name, bytes) -> {
            ClassModel model = ClassFile.of().parse(bytes);
            if (!model.thisClass().asInternalName().equals("dev/compute/memory/cuda/DriverCalls")) {
                for (MethodModel method : model.methods()) {
                    method.code().ifPresent(code -> code.forEach(element -> {
                        if (element instanceof InvokeInstruction call && call.owner().asInternalName().equals("jcuda/driver/JCudaDriver")
                                && call.name().stringValue().startsWith("cu")) {
                            direct.add(model.thisClass().asInternalName() + "." + method.methodName() + " calls " + call.name());
                        }
                    }));
                }
            }
        });
        assertThat(classFiles).as("the backend's classes").hasSizeGreaterThan(20);
        assertThat(direct).as("JCuda driver calls outside DriverCalls").isEmpty();
    }

    /** The class files under a folder of classes or in a jar (as the GPU machine's bundle has them: no zip file system there). */
    private static Map<String, byte[]> classFiles(Path classes) throws IOException {
        Map<String, byte[]> files = new TreeMap<>();
        if (Files.isDirectory(classes)) {
            try (Stream<Path> walk = Files.walk(classes)) {
                for (Path file : walk.filter(f -> f.toString().endsWith(".class")).toList()) {
                    files.put(classes.relativize(file).toString(), Files.readAllBytes(file));
                }
            }
        } else {
            try (JarFile jar = new JarFile(classes.toFile())) {
                for (JarEntry entry : Collections.list(jar.entries())) {
                    if (entry.getName().endsWith(".class")) {
                        try (InputStream in = jar.getInputStream(entry)) {
                            files.put(entry.getName(), in.readAllBytes());
                        }
                    }
                }
            }
        }
        return files;
    }
}
