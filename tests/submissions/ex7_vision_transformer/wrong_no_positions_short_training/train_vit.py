env.seed_everything(0)
vit = ViT(img_size=8, patch_size=2, in_channels=1, num_classes=10, d_model=64, num_heads=4, num_layers=2, d_ff=128)
vit_cpu_seconds = fit(vit, digits.x_train, digits.y_train, epochs=3, lr=3e-3)
print(f"ViT: {count_parameters(vit):,} parameters, test accuracy {test_accuracy(vit):.3f}, {vit_cpu_seconds:.1f} CPU s")
